"""`python -m ptc.cli`: the `ptc` command without its console script."""
from . import main

main()
