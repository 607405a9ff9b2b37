"""``python -m steward_client``: the command-line client (see ``_cli``)."""
from ._cli import run

if __name__ == "__main__":
    run()
