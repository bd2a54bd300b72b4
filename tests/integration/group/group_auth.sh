#!/bin/bash
# A group's etcd locked down: a master authenticates as an etcd user
# (refused with a password file others may read, or a wrong password;
# leads with the right one, and again after etcd revoked its token), and
# over TLS with a client certificate; etcd refuses a put of the
# membership key without credentials (tests/integration/group/group_auth.py
# does the work and says how).

. "$(dirname "$0")/../lib.sh"
sw_init group_auth
sw_group_driver group_auth.py "etcd authentication"
