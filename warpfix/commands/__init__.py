"""One module per CLI verb: ``add_parser(subparsers)`` registers it, ``run(args)`` executes it."""
