"""Multi-task fine-tuning: one encoder, one head per task, batches of one task at a time
(`run.run_multitask`; the task mix in `sampling`, the tasks file in `tasks_file`)."""
