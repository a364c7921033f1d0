"""docs/columns.md, the canonical columns a profile maps an export to, is what the code says."""

from tools import canonical_columns as columns


def test_the_columns_page_is_generated_and_current():
    assert columns.OUT.read_text(encoding="utf-8") == columns.render(), "run `python tools/canonical_columns.py`"


def test_every_canonical_column_is_listed_with_what_reads_it():
    from fundgrpo.data.canonical import COLUMNS

    page = columns.render()
    for c in COLUMNS:
        assert f"| `{c.name}` |" in page
    assert "`default.yaml` criterion sharpe (35%)" in page  # a criterion names its methodology file and weight
