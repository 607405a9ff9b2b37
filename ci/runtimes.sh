#!/bin/sh
# Node, Bun and Deno × PGlite (and PostgreSQL when TEST_DATABASE_URL is set): start the server,
# replay every contract fixture, SIGTERM, exit 0. Prints "N passed, N failed"; non-zero on failure.
# Bun and Deno are not part of `npm ci`: on first use they are installed into .runtimes/ (ignored
# by git) with `npm install --prefix .runtimes` at the versions pinned in bench/lib.ts.
set -e
cd "$(dirname "$0")/.."
exec node --import tsx ci/runtimes.mjs "$@"
