"""The `ablate` subcommands that read finished results (`report`, `compare`), each with `main(argv) -> int`.

They live here, not in `ablations/commands/`, so that nothing in `ablations` imports `reports`: the dispatcher
(`ablations.cli`) names them by module path, and the sweep runs `report` through `ablations.cli.run_command`.
"""
