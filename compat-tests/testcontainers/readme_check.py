"""Every code block of README.md's Testcontainers section appears verbatim in the test file it
comes from, so the README's examples are the tests run here."""

import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]
readme = (root / "README.md").read_text()
section = readme[readme.index("### Testcontainers"):]
# The section ends at the next heading of its level or above.
section = section[: re.search(r"\n#{2,3} ", section).start()]
here = root / "compat-tests" / "testcontainers"
sources = {
    "java": here / "java/src/test/java/sluice/KafkaContainerTest.java",
    "python": here / "python/test_testcontainers.py",
    "go": here / "go/kafka_test.go",
}
blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
assert {lang for lang, _ in blocks} == set(sources), blocks
for lang, block in blocks:
    if block not in sources[lang].read_text():
        sys.exit(f"README.md's {lang} example is not in {sources[lang]}")
print(f"{len(blocks)} passed, 0 failed: README.md's Testcontainers examples are the tests")
