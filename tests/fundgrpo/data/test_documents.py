"""Documents beside the fund table: read from a table or a folder, checked against the funds, dated."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from fundgrpo.data import documents
from fundgrpo.data.reading import IngestError
from fundgrpo.params import DocumentsSourceParams

FUNDS = pd.DataFrame(
    {
        "share_class_id": ["S1A", "S1B", "S2A"],
        "fund_id": ["F1", "F1", "F2"],
        "company": ["Acme Asset Management", "Acme Asset Management", "한빛자산운용"],
        "as_of": ["2024-12"] * 3,
    }
)


def note(key: str, value: str, date: str = "2024-03-15", text: str = "The lead manager left the firm.") -> str:
    return f"---\n{key}: {value}\ndate: {date}\nkind: meeting_note\n---\n{text}\n"


def test_a_folder_of_notes_and_a_table_are_read_and_keyed(tmp_path):
    (tmp_path / "f1.md").write_text(note("fund_id", "F1"), encoding="utf-8")
    (tmp_path / "korean.txt").write_text(
        note("company", "한빛자산운용", text="금융당국은 과태료를 부과했다."), encoding="utf-8"
    )
    (tmp_path / ".hidden.md").write_text("not a document", encoding="utf-8")
    pd.DataFrame(
        {
            "document_id": ["N1"],
            "share_class_id": ["S1B"],
            "date": ["2025-02-01"],
            "kind": ["news"],
            "language": [""],
            "text": ["A later note about the share class."],
        }  # fmt: skip
    ).to_csv(tmp_path / "table.csv", index=False)
    docs = documents.read(DocumentsSourceParams(path=str(tmp_path)), FUNDS)
    assert list(docs["document_id"]) == ["f1.md", "korean.txt", "N1"]  # oldest first
    assert list(docs["language"]) == ["en", "ko", "en"]  # detected where not declared
    assert list(docs["key_kind"]) == ["fund", "company", "share_class"]
    found = documents.by_share_class(docs, FUNDS, documents.as_of(DocumentsSourceParams(), FUNDS))
    # the share class's note is dated after the data's as-of month: no evaluation as of 2024-12 reads it
    assert [d.document_id for d in found["S1B"]] == ["f1.md"]
    assert [d.document_id for d in found["S2A"]] == ["korean.txt"]  # the company's document reaches its fund
    later = documents.by_share_class(docs, FUNDS, "2025-06")
    assert [d.document_id for d in later["S1B"]] == ["N1", "f1.md"]  # newest first


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("unknown.md", note("fund_id", "F9"), "field fund_id: 'F9' is not in the fund table"),
        ("company.md", note("company", "Nobody Ltd"), "field company: 'Nobody Ltd' is not in the fund table"),
        ("date.md", note("fund_id", "F1", date="15/03/2024"), "field date: '15/03/2024' is not a date"),
        ("month.md", note("fund_id", "F1", date="2024-13-01"), "field date: '2024-13-01' is not a date"),
        ("empty.md", note("fund_id", "F1", text=""), "field text: 0 characters, outside [10, 20000]"),
        (
            "two.md",
            "---\nfund_id: F1\ncompany: Acme Asset Management\ndate: 2024-01-01\nkind: news\n---\n"
            "Two keys for one document here.",
            "give exactly one of",
        ),  # fmt: skip
        ("bare.md", "The manager left, says nobody.", "no front matter"),
        (
            "lang.md",
            "---\nfund_id: F1\ndate: 2024-01-01\nkind: news\nlanguage: fr\n---\nLe gérant est parti hier soir.",
            "field language: 'fr'",
        ),  # fmt: skip
    ],
)
def test_a_bad_document_is_named_by_file_and_field_and_nothing_is_read(tmp_path, name, content, expected):
    (tmp_path / "good.md").write_text(note("fund_id", "F2"), encoding="utf-8")
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(IngestError) as err:
        documents.read(DocumentsSourceParams(path=str(tmp_path)), FUNDS)
    assert expected in str(err.value) and name in str(err.value)


def test_undecodable_text_and_repeated_ids_are_refused(tmp_path):
    (tmp_path / "cp949.txt").write_bytes(note("fund_id", "F1", text="운용역이 사임했다고 한다.").encode("cp949"))
    with pytest.raises(IngestError, match="cp949.txt: not UTF-8 text"):
        documents.read(DocumentsSourceParams(path=str(tmp_path)), FUNDS)
    rows = {"document_id": ["D1", "D1"], "fund_id": ["F1", "F2"], "date": ["2024-01-01"] * 2, "kind": ["news"] * 2,
            "text": ["The first of two documents.", "The second of two documents."]}  # fmt: skip
    pd.DataFrame(rows).to_csv(tmp_path / "twice.csv", index=False)
    with pytest.raises(IngestError, match="'D1' is given twice"):
        documents.read(DocumentsSourceParams(path=str(tmp_path / "twice.csv")), FUNDS)


def test_a_table_without_a_key_column_names_what_it_lacks(tmp_path):
    pd.DataFrame({"document_id": ["D1"], "date": ["2024-01-01"], "text": ["x" * 30]}).to_csv(tmp_path / "t.csv")
    with pytest.raises(IngestError, match=r"columns \['kind', 'one of share_class_id / fund_id / company'\] missing"):
        documents.read(DocumentsSourceParams(path=str(tmp_path / "t.csv")), FUNDS)


def test_an_empty_or_absent_folder_gives_no_documents_and_says_so(tmp_path):
    (tmp_path / ".gitkeep").write_text("", encoding="utf-8")
    assert documents.read(DocumentsSourceParams(path=str(tmp_path)), FUNDS).empty
    absent = documents.read(DocumentsSourceParams(path=str(tmp_path / "absent")), FUNDS)
    assert absent.empty and list(absent.columns) == list(documents.COLUMNS)
    assert documents.summary(absent, None, tmp_path / "absent").endswith(
        "absent does not exist: ingest.documents.path)"
    )


def test_the_analysts_judgements_name_each_bad_row_and_field(tmp_path):
    docs = pd.DataFrame({"document_id": ["D1"], "text": ["Markets were calm. The lead manager left the firm."]})
    rows = pd.DataFrame({"fund_id": ["F1", "F9", "F1", "F1", "F1"], "criterion": ["people"] * 5,
                         "judgement": ["-1", "-1", "down", "-1", "-1"], "document_id": ["D1", "D1", "D1", "D2", "D1"],
                         "quote": ["The lead manager left", "calm.", "calm.", "x", "calm. The lead"]})  # fmt: skip
    rows.to_csv(tmp_path / "judged.csv", index=False)
    params = DocumentsSourceParams(path=str(tmp_path), judgements="judged.csv")
    with pytest.raises(IngestError) as err:
        documents.read_judgements(params, FUNDS, docs, tmp_path)
    said = str(err.value)
    assert "4 problem(s); nothing was written" in said
    assert "row 2: field fund_id: 'F9'" in said and "row 3: field judgement: 'down'" in said
    assert "row 4: field document_id: 'D2' is not a document" in said
    assert "row 5: field quote: runs across sentences of 'D1'" in said  # an answer cites whole sentences
    rows.iloc[[0]].to_csv(tmp_path / "good.csv", index=False)
    good = documents.read_judgements(replace(params, judgements="good.csv"), FUNDS, docs, tmp_path)
    assert good["judgement"].tolist() == [-1]
