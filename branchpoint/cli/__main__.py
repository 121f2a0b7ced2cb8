"""`python -m branchpoint.cli …`: the same command line as the `branchpoint` script."""

from branchpoint.cli import main

main()
