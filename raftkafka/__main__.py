"""`python -m raftkafka`: the command-line entry point."""
from raftkafka.cli.main import main

if __name__ == "__main__":
    main()
