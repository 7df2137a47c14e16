"""`python -m attnviz`."""

from attnviz.cli import main

if __name__ == "__main__":
    main()
