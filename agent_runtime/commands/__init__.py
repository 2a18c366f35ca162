"""Subcommands of `agent-runtime`: each module has add_arguments(parser) and run(args) -> exit code."""
