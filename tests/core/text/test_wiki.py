"""core.text.wiki: known-answer cases of the markup cleaner, and the real dump's articles."""

from __future__ import annotations

import pytest

from methodkit.core.text.wiki import clean_wikitext


@pytest.mark.parametrize(
    ("wikitext", "plain"),
    [
        # templates, also nested to any depth and with named parameters
        ("Paris {{IPA|/ˈpærɪs/}} is big.", "Paris is big."),
        ("a {{outer|{{inner|x}}|y={{deep|{{deeper}}}}}} b", "a b"),
        ("({{lang-fr|Paris}}) is", "is"),  # the empty brackets a dropped template leaves go too
        # links: target, label, trailing letters, files (with nested links), categories, interlanguage
        ("[[Paris|the capital]] and [[France]] and [[bus]]es", "the capital and France and buses"),
        ("A [[File:x.jpg|thumb|A [[b|c]] caption]] B [[Category:Cities]] [[de:Paris]]", "A B"),
        ("[[:Category:Cities|cities]] [[Image:y.png]]", "cities"),
        ("{{a|[[b|c]]}}[[d|{{e}}f]]", "f"),
        # references, named and self-closing; their templates go with them
        ('x.<ref>Smith {{cite|y}} 2001</ref> y<ref name="a"/> z<ref name=b>q</ref>.', "x. y z."),
        # tables, with templates in cells
        ('before\n{| class="wikitable"\n|-\n! h1 !! h2\n|-\n| c1 || {{t|c2}}\n|}\nafter', "before\n\nafter"),
        ("a\n{|\n| outer\n{|\n| inner\n|}\n| more\n|}\nb", "a\n\nb"),
        # HTML entities are decoded last, so an escaped tag is text, not markup
        ("A&nbsp;B &amp; C &ndash; D &lt;ref&gt;kept&lt;/ref&gt;", "A B & C – D <ref>kept</ref>"),
        # external links keep their label only
        ("See [http://example.org the site] or [https://example.org].", "See the site or."),
        ("'''Bold''' and ''italic'' and '''''both'''''", "Bold and italic and both"),
        (
            "Intro\n== History ==\nText\n=== Early ===\nMore\n== References ==\n* Smith 2001\n",
            "Intro\nHistory\nText\nEarly\nMore",
        ),
        ("a<!-- hidden [[x]] {{y}} -->b", "ab"),
        ("* one\n* two\n# three\n: indented", "one\ntwo\nthree\nindented"),
        ("x <small>tiny</small> y<br/>z <nowiki>[[raw]]</nowiki>", "x tiny y z [[raw]]"),
        ("x <math>\\frac{1}{2}</math> y __NOTOC__", "x y"),
        ("unmatched }} and ]] stay", "unmatched }} and ]] stay"),
    ],
)
def test_known_answers(wikitext, plain):
    assert clean_wikitext(wikitext) == plain


def test_enwiki_articles_are_clean():
    from methodkit.core.text.corpora import enwiki_gensim

    corpus = enwiki_gensim()
    assert len(corpus) == 106 and len(set(corpus.titles)) == 106  # 206 pages less 100 redirects
    assert corpus.titles[0] == "Anarchism"
    assert corpus.texts[0].startswith("Anarchism is a political philosophy that advocates self-governed societies")
    joined = "\n".join(corpus.texts)
    for residue in ("{{", "}}", "[[", "]]", "<ref", "</ref>", "{|", "'''", "&nbsp;", "&amp;", "thumb|", "Category:"):
        assert residue not in joined, residue
    assert 2_000_000 < corpus.n_bytes < 4_000_000  # cleaning keeps the prose (the raw wikitext is 5.7 MB)
