"""_lib.py's ctypes structs against the C headers, as the compiler lays
them out: tests/python/layout (built by make check) prints each mirrored
struct's size and its fields' offsets and sizes.  A field added to, moved
in or resized in include/wharf/ without the same change in _lib.py fails
here, instead of silently shifting every field after it in Python."""

import ctypes
import os
import subprocess
import unittest

from wharf import _lib

LAYOUT = os.path.join(os.environ.get("WHARF_BUILDDIR", ""), "tests",
                      "python", "layout")


def c_layout():
    """{class: (size, {field: (offset, size)})} from the C compiler."""
    out = subprocess.run([LAYOUT], check=True, capture_output=True,
                         text=True).stdout
    got = {}
    for line in out.splitlines():
        words = line.split()
        if "." in words[0]:
            cls, field = words[0].split(".", 1)
            got[cls][1][field] = (int(words[1]), int(words[2]))
        else:
            got[words[0]] = (int(words[1]), {})
    return got


def mirrored():
    """_lib.py's structs: every ctypes.Structure subclass it defines."""
    return {name: cls for name, cls in vars(_lib).items()
            if isinstance(cls, type) and issubclass(cls, ctypes.Structure)
            and cls.__module__ == _lib.__name__}


class TestLayout(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(LAYOUT, os.X_OK):
            raise AssertionError("%s is not built (make check builds it)"
                                 % LAYOUT)
        cls.c = c_layout()

    def test_every_struct_is_checked(self):
        # A struct mirrored in Python and not listed in layout.c, or the
        # other way round.
        self.assertEqual(sorted(mirrored()), sorted(self.c))

    def test_sizes_and_offsets_match_c(self):
        for name, cls in sorted(mirrored().items()):
            size, fields = self.c[name]
            with self.subTest(struct=name):
                self.assertEqual(
                    ctypes.sizeof(cls), size,
                    "sizeof %s: %d in _lib.py, %d in C"
                    % (name, ctypes.sizeof(cls), size))
                names = [f[0] for f in cls._fields_]
                self.assertEqual(names, sorted(fields, key=fields.get),
                                 "%s's fields in C's order" % name)
                for field in names:
                    d = getattr(cls, field)
                    self.assertEqual(
                        (d.offset, d.size), fields[field],
                        "%s.%s: offset, size %s in _lib.py, %s in C"
                        % (name, field, (d.offset, d.size),
                           fields[field]))


if __name__ == "__main__":
    unittest.main()
