#!/bin/bash
# A member of a group of masters away for longer than etcd keeps the log,
# and one with an empty data directory, catch up from the leader's
# checkpoint by themselves; one with the wrong session key is refused it
# (tests/integration/group/group_catchup.py does the work and says how).

. "$(dirname "$0")/../lib.sh"
sw_init group_catchup --root
sw_group_driver group_catchup.py catch-up
