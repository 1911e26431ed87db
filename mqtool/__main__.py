"""``python -m mqtool`` and the ``mqtool`` script: a plain ``verify`` runs without loading click
(:func:`mqtool.entry.run_fast`); every other command line goes to the click CLI (:mod:`mqtool.cli`)."""
import sys


def main(argv=None) -> None:
    from mqtool.entry import run_fast

    args = sys.argv[1:] if argv is None else list(argv)
    if not run_fast(args):
        from mqtool.cli import main as cli_main

        cli_main(argv)


if __name__ == "__main__":  # pragma: no cover
    main()
