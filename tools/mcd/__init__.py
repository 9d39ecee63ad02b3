"""Meta Circuit Distillation: transcoder attribution graphs of teacher and student, aligned by optimal transport."""
