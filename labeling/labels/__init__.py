"""Labels: jobs, the annotators' queue, agreement, review, gold, and exports.

* ``agreement`` — Cohen's and Fleiss' kappa, percent agreement, gold accuracy (plain
  functions over label lists, free of Django);
* ``services`` — writes: jobs, claiming the next episode, annotations, reviews, gold labels,
  and accepted labels written back to the episode;
* ``selectors`` — reads: a job's progress, throughput, agreement, review queue, and why
  episodes do not export;
* ``exports`` — a dataset in LeRobot v3.0 / v2.1 layouts or as a Parquet / CSV manifest.
"""
