"""Instagram conversations: comments, @mentions and DMs answered in the persona's voice.

``webhook`` (the ``carrier.webhooks`` receiver: verify, store each event as a job), ``events``
(Meta's deliveries read), ``handler`` (the ``instagram.inbound`` job), ``conversation`` (an event
through policy, pipeline and outbox), ``policy`` (whom to answer, caps), ``replies`` (a reply
sent once, the messaging window), ``voice`` (``style.comment`` in the prompt).
"""
