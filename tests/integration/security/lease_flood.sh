#!/bin/bash
# A peer floods a master whose etcd lease is in doubt: the master reads
# no more of it until the lease is renewed, and then serves it (review
# L1; tests/integration/security/lease_flood.py does the work and says
# how).

. "$(dirname "$0")/../lib.sh"
sw_init lease_flood --root
sw_group_driver lease_flood.py lease_flood
