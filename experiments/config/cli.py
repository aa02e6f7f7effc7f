"""How every entry point treats bad input: one line on stderr naming the value, exit code 2;
and asking for help (--help, --helpshort, --helpfull, --helpxml) exits 0.

    app.run(main, flags_parser=cli.parse_flags)
"""
import sys

from absl import flags

_HELP_FLAGS = ("help", "helpshort", "helpfull", "helpxml", "?")


def bool_flag(name, on):
    """absl's spelling of a boolean flag set to `on`: --name or --noname (the commands the
    toolkit writes for its own runs say the value either way)."""
    return f"--{'' if on else 'no'}{name}"


def bad_input(message):
    sys.stderr.write(f"error: {message}\n")
    sys.exit(2)


def _asked_for_help(argv):
    for arg in argv[1:]:
        if arg == "--":  # what follows is for another program (experiments.vertex's run flags)
            return False
        if arg.startswith("-") and arg.lstrip("-").split("=")[0] in _HELP_FLAGS:
            return True
    return False


def parse_flags(argv):
    """absl's parser, but a bad flag value exits 2 with one line (absl: 'FATAL ...', exit 1),
    and the usage printed for a help flag exits 0 (absl exits 1 after printing it)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        bad_input(str(e).splitlines()[0])
    except SystemExit as e:
        if e.code == 1 and _asked_for_help(argv):
            sys.exit(0)
        raise
