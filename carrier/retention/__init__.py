"""Retention: what an agent is told is kept only as long as its character says.

A character's ``settings.retention`` (:class:`~carrier.character.parts.RetentionPolicy`) names
days: ``messages`` (conversation messages, either side), ``uploads`` (files sent with messages
and media to post), and whether old messages are summarized before they go
(``summarizeBeforeDelete``). A daily job (:mod:`carrier.retention.job`, registered by
``carrier run``) applies every agent's policy and the audit log's own age limit; ``carrier memory
prune`` deletes by hand (:mod:`carrier.retention.prune`). Every run is in the audit log
(``memory.prune``, with counts).
"""
