"""The course: what the notebooks call, and what runs and checks them.

Notebook helpers by subject, the charts, the synthetic cassava sample, the lab runner
(`labkit lab`), the exercises of notebook 03, the preemption demo, the statements a run
prints from what it recorded (`claims`), and the measured durations the docs quote.

May import: anything in labkit (`cloud`, `local`, `i18n`) and `trainer`. Nothing else in
labkit imports the course.
"""
