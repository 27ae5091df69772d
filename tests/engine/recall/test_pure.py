"""Ranking, fusion, budget packing, scope rule and query safety: pure functions."""

from __future__ import annotations

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.index.schema import TOKENIZE, FactRow
from engine.recall import budget as budgeting
from engine.recall.fusion import Candidate, Weights, column_weights, fuse, group_scores
from engine.recall.lexical import lexical_score
from engine.recall.query import parse_query, without_names
from engine.recall.relevance import confidence, query_confidence
from engine.recall.scopes import FactHit, scope_rule
from engine.scope import Limit
from engine.store.ids import fact_id

NASTY = [
    'don\'t "quote" AND OR NOT NEAR(a b) -hyphen- col:umn * ^ (paren',
    "🚀🔥 emoji only",
    "日本語のテキスト と Ελληνικά и русский",
    '"""',
    "AND",
    "NEAR/3",
    "",
]


@pytest.fixture(scope="module")
def fts() -> apsw.Connection:
    db = apsw.Connection(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{TOKENIZE}')")
    db.execute("INSERT INTO t VALUES ('don''t panic: the near hyphen-ated 日本語 rocket')")
    return db


@pytest.mark.req("recall:query-safe")
@pytest.mark.parametrize("text", NASTY)
def test_nasty_queries_never_break_fts5(fts: apsw.Connection, text: str) -> None:
    expr = parse_query(text).fts
    if expr:
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()
    assert all(part.startswith('"') and part.endswith('"') for part in expr.split(" OR ") if expr)


@pytest.mark.req("recall:query-safe")
@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_a_safe_fts5_query(fts: apsw.Connection, text: str) -> None:
    expr = parse_query(text).fts
    if expr:
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()


@pytest.mark.req("life:lexical")
def test_lexical_coverage_tags_over_body_and_verbatim_bonus() -> None:
    terms = parse_query("the deploy branch policy").terms
    assert terms == ("deploy", "branch", "policy")  # stop words and short words dropped
    half = lexical_score(terms, "we deploy on fridays")
    full = lexical_score(terms, "deploy branches need a policy")
    tagged = lexical_score(terms, "deploy needs a policy", tags=["branch"])
    verbatim = lexical_score(terms, "our deploy branch policy is strict")
    assert 0 < half < full < tagged < verbatim
    assert lexical_score(terms, "nothing in common") == 0.0


@pytest.mark.req("life:rank-floors")
def test_fusion_weights_priors_and_importance_only_reorders_near_ties() -> None:
    strong = Candidate(1, "nte_strong", "g1", bm25=9.0, cosine=0.8, knn=True, importance=0.0)
    weak = Candidate(2, "nte_weak", "g2", bm25=3.0, cosine=0.3, knn=True, importance=1.0)
    only_words = Candidate(3, "nte_words", "g2", bm25=8.0)
    ranked = fuse([weak, only_words, strong])
    assert [s.memory for s in ranked] == ["nte_strong", "nte_words", "nte_weak"]
    assert [s.reason for s in ranked] == ["both", "keyword", "both"]
    named = fuse(
        [strong, weak, Candidate(4, "nte_named", "g2", bm25=8.5, cosine=0.75, knn=True, person=True)]
    )
    assert named[0].memory == "nte_named"  # the query names its speaker
    sessions = group_scores({"g2": 5.0}, {"g1": 0.1, "g2": 0.6})
    assert sessions["g2"] > sessions["g1"]
    boosted = fuse([strong, weak], sessions, Weights(group=10.0))
    assert boosted[0].memory == "nte_weak"


@pytest.mark.req("quality:layouts")
def test_the_neighbours_weigh_less_when_the_query_names_someone_memories_are_about() -> None:
    columns = (("text", 1.0), ("context", 0.75), ("dates", 2.0))
    assert column_weights(columns, []) == (1.0, 0.75, 2.0)  # nobody named
    assert column_weights(columns, [0.01]) == (1.0, 0.75, 2.0)  # only addressed or mentioned
    assert column_weights(columns, [0.01, 0.5]) == (1.0, 0.6, 2.0)  # one of them is a subject
    assert column_weights(columns, [0.2]) == (1.0, 0.6, 2.0)  # the share is inclusive
    custom = Weights(subject_context=0.3, subject_share=0.6)
    assert column_weights(columns, [0.5], custom) == (1.0, 0.75, 2.0)
    assert column_weights(columns, [0.7], custom) == (1.0, 0.3, 2.0)


@pytest.mark.req("recall:budget-order")
def test_facts_come_first_within_their_share_and_leave_the_rest_to_notes() -> None:
    facts = [budgeting.Entry(f"fct_{i}", 60, 1.0, "fact") for i in range(5)]
    notes = [budgeting.Entry(f"nte_{i}", 60, 1.0, "both") for i in range(5)]
    plan = budgeting.pack(facts, notes, 400, facts_share=0.5)
    assert plan.facts == ("fct_0", "fct_1", "fct_2")  # 3 × 60 ≤ 200
    few = budgeting.pack(facts[:1], notes, 400, facts_share=0.5)
    assert len(few.notes) == 5  # the unused facts share goes to notes
    alone = budgeting.pack([], [budgeting.Entry("nte_big", 900, 1.0, "both", protected=True, least=40)], 300)
    assert alone.squeeze == ("nte_big", 300)
    # facts give way to the smallest form of the newest relevant note, never the other way round
    crowded = budgeting.pack(
        facts, [budgeting.Entry("nte_new", 900, 1.0, "both", protected=True, least=200)], 300
    )
    assert crowded.squeeze == ("nte_new", 300 - 60) and crowded.facts == ("fct_0",)
    uncut = budgeting.pack([], [budgeting.Entry("nte_big", 900, 1.0, "both", protected=True)], 300)
    assert uncut.notes == () and uncut.dropped == ("nte_big",)  # it has no smaller form


@pytest.mark.req("recall:get-context")
def test_items_are_cut_at_1000_characters_and_marked() -> None:
    text, cut = budgeting.cut_text("word " * 400)
    assert cut and len(text) <= 1000 and text.endswith(budgeting.CUT_MARK)
    assert budgeting.cut_text("short") == ("short", False)
    assert budgeting.estimate_tokens("abcd" * 10) == 10
    assert budgeting.estimate_tokens("日本") == 2


def row(subject: str, scope: str | None, obj: str) -> FactRow:
    key = subject.lower()
    return FactRow(
        0, fact_id(key, "database", scope), subject, "database", obj, "", key, "database", scope, None, ""
    )


@pytest.mark.req("recall:scope")
def test_a_scoped_fact_wins_over_the_unscoped_one_and_says_so() -> None:
    plain, scoped, other = (
        row("Fjord", None, "Postgres"),
        row("Fjord", "project:fjord", "SQLite"),
        row("Fjord", "project:x", "MySQL"),
    )
    twins = {r.memory: r for r in (plain, scoped, other)}
    found = [FactHit(plain, 2.0, 1.0), FactHit(other, 1.0, 1.0)]
    out = scope_rule(found, Limit("project:fjord"), twins)
    assert [h.row.object for h in out] == ["SQLite"]
    assert out[0].scope_note and "project:fjord" in out[0].scope_note
    assert [h.row.object for h in scope_rule(found, None, twins)] == ["Postgres", "MySQL"]
    # a pinned connection that does not read unscoped memories: its scope's own facts, no word of others
    narrow = Limit("project:fjord", unscoped=False)
    out = scope_rule(
        [FactHit(plain, 2.0, 1.0), FactHit(scoped, 1.0, 1.0), FactHit(other, 1.0, 1.0)], narrow, {}
    )
    assert [(h.row.object, h.scope_note) for h in out] == [("SQLite", None)]


@pytest.mark.req("recall:honest-miss")
def test_match_confidence_is_absolute_and_unknown_names_lower_it() -> None:
    assert confidence(0.0, 0.1) == 0.0
    assert confidence(0.0, 0.9) == 1.0
    assert confidence(0.8, None) == 0.8
    assert confidence(0.0, 0.15) == 0.0 and confidence(0.0, 0.6) == 1.0  # the cosine band, 0.15 … 0.6
    assert confidence(0.0, 0.375) == pytest.approx(0.5)
    assert query_confidence([0.8], unknown_names=1, named=1) < query_confidence([0.8], 0, 1)


@pytest.mark.req("quality:honest-miss")
def test_coverage_counts_given_words_as_found_wherever_the_memory_is_silent() -> None:
    terms = ("adoption", "caroline", "researched")  # not in the memory's order: no verbatim bonus
    plain = lexical_score(terms, "I researched adoption agencies last week.")
    named = lexical_score(terms, "Caroline: I researched adoption agencies last week.")
    assert plain < named
    given = lexical_score(terms, "I researched adoption agencies last week.", given={"caroline"})
    assert given == lexical_score(
        terms, "Caroline: I researched adoption agencies last week.", given={"caroline"}
    )
    assert given == named  # the name counts the same whether the memory repeats it or not
    assert lexical_score(terms, "Nothing about it.", given={"caroline"}) < 0.5


@pytest.mark.req("quality:honest-miss")
def test_months_weekdays_and_words_of_time_are_not_names_in_a_query() -> None:
    # the index reads names with the same list (engine.index.mentions.NOT_NAMES)
    assert parse_query("What did Melanie paint in June 2023?").names == ("melanie",)
    assert parse_query("Where was Dave on Sunday, the Monday before Christmas?").names == (
        "dave",
        "christmas",
    )
    assert parse_query("Did Jolene say Thanks Yesterday?").names == ("jolene",)
    assert parse_query("When did Caroline's team meet Priya?").names == ("caroline", "priya")
    assert parse_query("What happened in May?").terms == ("happened", "may")  # still a word to find


@pytest.mark.req("quality:layouts")
def test_the_dense_query_leaves_out_the_given_names() -> None:
    assert without_names("What did Caroline's team research?", {"caroline"}) == "What did team research?"
    assert without_names("Did Melanie and Caroline meet in Paris?", {"melanie", "paris"}) == (
        "Did and Caroline meet in ?"
    )
    assert without_names("What did caroline research?", {"caroline"}) == "What did caroline research?"
    assert without_names("Caroline?", {"caroline"}) == "Caroline?"  # nothing else left: unchanged
    assert without_names("What did Caroline research?", set()) == "What did Caroline research?"
