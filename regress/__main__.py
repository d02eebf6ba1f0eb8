"""``python -m regress``: the console script without the script (used to start child commands)."""

from regress.cli import main

if __name__ == "__main__":
    main()
