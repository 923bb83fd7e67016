"""Scheduled jobs: schedules, the job store in state.db, the Scheduler actor, fires, delivery."""
