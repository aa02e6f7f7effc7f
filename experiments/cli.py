"""How every entry point treats bad input: one line on stderr naming the value, exit code 2.

    app.run(main, flags_parser=cli.parse_flags)
"""
import sys

from absl import flags


def bad_input(message):
    sys.stderr.write(f"error: {message}\n")
    sys.exit(2)


def parse_flags(argv):
    """absl's parser, but a bad flag value exits 2 with one line (absl: 'FATAL ...', exit 1)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        bad_input(str(e).splitlines()[0])
