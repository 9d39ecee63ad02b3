"""Real text corpora offline, and what turns them into token ids (methodkit.core.text).

corpora.py: the corpora (enwiki-gensim, lee-news, fortunes, text:FILE) and their registration in
core.datasets; wiki.py: MediaWiki markup to plain text; tokenize.py: byte and BPE tokenizers;
tokens.py: the document split and the NPZ token files.
"""
