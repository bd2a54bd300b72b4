#!/bin/bash
# permissions.sh through a mount without the kernel's default_permissions
# (-o no_default_permissions): the master and the mount check everything.
SW_PERM_OPTS=no_default_permissions exec bash "$(dirname "$0")/permissions.sh"
