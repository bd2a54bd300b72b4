#!/bin/bash
# A leader of a group of masters frozen for longer than its lease: mounts
# leave it for the new leader, and once let go it answers nothing stale
# (tests/integration/group/group_lease.py does the work and says how).

. "$(dirname "$0")/../lib.sh"
sw_init group_lease --root
sw_group_driver group_lease.py lease
