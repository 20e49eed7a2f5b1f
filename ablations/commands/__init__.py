"""One module per `ablate` subcommand, each with `main(argv) -> int`."""
