"""What every bench uses: its command line (`options.py`: a typed config's flags, `--config FILE`, one-line errors),
its docs/BENCHMARKS.md section (`report.py`, and the machine it names), the step runner over `lmforge <stage>`
(`steps.py`, flows/stages' skip rule), the peak RSS of a process tree (`peak_rss.py`), and what several benches
measure on: the real text of Debian documentation and other packages (`real_text.py`) and the labelled tasks with
their fine-tuning caps (`tasks.py`). It imports the layers below bench only, never a bench subpackage."""
