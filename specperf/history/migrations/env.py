"""Alembic's environment for the history store: run on the connection specperf hands over
(history.database.migrate), never from a URL of its own."""

from alembic import context

from specperf.history.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
