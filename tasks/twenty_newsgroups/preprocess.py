"""The preprocessing of thesis 3.6: "remove headers, signature blocks, and quotations from each news article,
following the recommended practice outlined by the Scikit-learn library", i.e. ``fetch_20newsgroups(remove=(
'headers', 'footers', 'quotes'))``.

:func:`clean_document` applies scikit-learn's own three functions in the order ``fetch_20newsgroups`` applies them
(header, then footer, then quotes), so the rules are scikit-learn's by construction (scikit-learn is a dependency of
harness):

- header: everything before the first blank line is dropped;
- footer (signature block): the last line that is blank or made only of hyphens, and everything after it, is dropped
  (of the stripped text; the text stays whole when that line would be the first);
- quotes: lines that start with ``>`` or ``|``, start with "In article" or "Quoted from", or contain "writes:",
  "writes in", "wrote:", "says:" or "said:" are dropped.

The bundled data (``tasks/data/20newsgroups/``) was cleaned once with this function by
``scripts/bundle_20newsgroups.py``; tasks read the cleaned text and never run it. ``tests/test_twenty_newsgroups.py``
re-derives bundled documents from a raw sample (``tests/fixtures/20newsgroups-raw-sample.jsonl.gz``) with it.
"""

from __future__ import annotations

from harness import HarnessError


def clean_document(raw: str) -> str:
    """``raw`` (a whole message, headers included) with headers, signature block and quoted lines removed, exactly as
    ``fetch_20newsgroups(remove=('headers', 'footers', 'quotes'))`` does."""
    try:
        from sklearn.datasets._twenty_newsgroups import (
            strip_newsgroup_footer,
            strip_newsgroup_header,
            strip_newsgroup_quoting,
        )
    except ImportError as exc:  # a scikit-learn release that renamed its private module
        raise HarnessError(
            f"scikit-learn's 20 Newsgroups preprocessing functions are not importable ({exc}); install a "
            "scikit-learn that has sklearn.datasets._twenty_newsgroups (1.3 to 1.9 do)."
        ) from None
    return strip_newsgroup_quoting(strip_newsgroup_footer(strip_newsgroup_header(raw)))
