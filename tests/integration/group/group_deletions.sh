#!/bin/bash
# Chunk deletions survive a failover of the group's leader half-way: the
# new leader deletes the removed chunks' files at once, not after
# stray_grace (tests/integration/group/group_deletions.py does the work
# and says how).

. "$(dirname "$0")/../lib.sh"
sw_init group_deletions --root
sw_group_driver group_deletions.py deletions-failover
