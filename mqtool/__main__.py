"""``python -m mqtool`` and the ``mqtool`` script: a plain ``verify`` runs without loading click
(:func:`mqtool.entry.run_fast`); every other command line goes to the click CLI (:mod:`mqtool.cli`)."""
import sys


def main(argv=None) -> None:
    try:
        _main(argv)
    finally:
        if argv is None:        # the process's own command line: the command is over, the interpreter exits
            # Its last full collection would walk every object the run made (~10 ms after a big verify) to
            # find cycles nothing needs freed at exit: frozen, they are left to the exit itself.
            import gc

            gc.freeze()


def _main(argv) -> None:
    from mqtool.entry import run_fast

    args = sys.argv[1:] if argv is None else list(argv)
    if not run_fast(args):
        from mqtool.entry import start_early

        end_early = start_early(args)       # rebuild-index: parsing starts while click loads
        try:
            from mqtool.cli import main as cli_main

            cli_main(argv)
        finally:
            if end_early is not None:
                end_early()


if __name__ == "__main__":  # pragma: no cover
    main()
