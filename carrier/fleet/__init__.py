"""The fleet: what every Carrier process agrees on about agents, kept in the store.

Each agent's character history (numbered revisions, who made each), its desired state (running
or stopped, and where its clients may run), the mark of the last character-file import, a change
log that processes follow to apply each other's edits, and leases that give one process at a time
a platform connection or a room. See :mod:`carrier.fleet.base`.
"""
