// Bundles src/index.ts into dist/steward.js (ES2022 ESM, no dependencies) for Node without a
// TypeScript loader and for browsers (<script type="module">). Bun and Deno run src/ directly.
// esbuild comes from the Steward repository's own dependencies: `node clients/typescript/build.mjs`.
import { build } from 'esbuild'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
await build({
  entryPoints: [join(here, 'src', 'index.ts')],
  outfile: join(here, 'dist', 'steward.js'),
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  sourcemap: true,
  legalComments: 'none',
})
console.log('wrote clients/typescript/dist/steward.js')
