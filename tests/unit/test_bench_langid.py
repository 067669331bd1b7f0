"""`lmforge bench langid`: the pure readers and the scoring, on short real excerpts (no download)."""
from __future__ import annotations

from bench.corpus.langid import bucket, choose, crawl_source, fortunes, gcide_quotations, man_paragraphs, summarise

# manpages-ru 4.18.1, securetty.5 (GPL-2.0-or-later, per the page's SPDX line): the NAME line is
# untranslated, and the .SH headings and the .TP tag are not running text.
SECURETTY = r""".\" SPDX-License-Identifier: GPL-2.0-or-later
.TH securetty 5 "30 октября 2022 г." "Linux man\-pages 6.03"
.SH ИМЯ
securetty \- list of terminals on which root is allowed to login
.SH ОПИСАНИЕ
Файл \fI/etc/securetty\fP содержит имена терминалов (по одному на строку, без
начального \fI/dev/\fP), которые считаются безопасными для передачи некоторых
токенов аутентификации.
.TP
\fB\-a\fP, \fB\-\-all\fP
не скрывать файлы начинающиеся с .
.nf
tty1
.fi
"""


def test_man_paragraphs_keep_running_text_only():
    assert man_paragraphs(SECURETTY) == [
        "securetty - list of terminals on which root is allowed to login",
        "Файл /etc/securetty содержит имена терминалов (по одному на строку, без начального /dev/), "
        "которые считаются безопасными для передачи некоторых токенов аутентификации.",
        "не скрывать файлы начинающиеся с ."]


def test_fortunes_and_gcide_quotations():
    # fortunes-ru 1.52, file 2002.11; GCIDE's entry "Abuse" with its Macaulay quotation.
    assert fortunes("Равенство! Голым народом должен править голый король.\n\t\t-- Евгений Кащеев\n%\nВторая.\n") == [
        "Равенство! Голым народом должен править голый король.\n\t\t-- Евгений Кащеев", "Вторая."]
    gcide = ("   3. A corrupt practice or custom; offense; crime; fault; as,\n      the abuses in the civil service.\n"
             "      [1913 Webster]\n\n            Abuse after disappeared without a struggle..\n"
             "                                                  --Macaulay.\n      [1913 Webster]\n")
    assert gcide_quotations(gcide) == ["Abuse after disappeared without a struggle.."]


def test_items_need_their_alphabet_and_are_sampled_by_hash():
    items = ["securetty - list of terminals on which root is allowed to login",  # untranslated: not Russian
             "Файл /etc/securetty содержит имена терминалов", "Файл /etc/securetty содержит имена терминалов", "Да"]
    chosen, distinct, usable = choose(items, "ru", 10)
    assert (chosen, distinct, usable) == (["Файл /etc/securetty содержит имена терминалов"], 3, 1)
    assert choose(items, "en", 10)[0] == ["securetty - list of terminals on which root is allowed to login"]


def test_crawl_sources_and_buckets():
    assert crawl_source("https://gimp-help-en.docs.invalid/gimp-bug-report.html") == "gimp-help-en"
    assert crawl_source("https://gimp-help-en-gb.docs.invalid/gimp-bug-report.html") is None  # repeats gimp-help-en
    assert crawl_source("https://debian-handbook.docs.invalid/ru-RU/sect.x.html") == "debian-handbook:ru"
    assert crawl_source("https://installation-guide-arm64.docs.invalid/en/ch01.html") is None
    assert [bucket(n) for n in (0, 49, 50, 199, 200, 999, 1000)] == ["<50", "<50", "50-200", "50-200", "200-1000",
                                                                     "200-1000", ">1000"]


def test_summarise_counts_accuracy_threshold_and_confusion():
    rows = [("a", "ru", "x" * 60, "ru", 0.9), ("a", "ru", "x" * 10, "bg", 0.6), ("b", "en", "y" * 10, "en", 0.4)]
    s = summarise(rows)
    assert s["all"] == {"items": 3, "accuracy": 2 / 3, "kept_right": 1 / 3}
    assert s["lang:ru"]["accuracy"] == 0.5 and s["macro_accuracy"] == 0.75
    assert s["bucket:ru:<50"]["accuracy"] == 0.0 and s["bucket:ru:50-200"]["accuracy"] == 1.0
    assert s["confusion"] == {"en": {"en": 1}, "ru": {"ru": 1, "bg": 1}} and s["errors_under_50_chars"] == 1.0
    assert s["errors"] == {"a": {"bg": 1}, "b": {}}
