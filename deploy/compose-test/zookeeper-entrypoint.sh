#!/bin/sh
# Writes ZooKeeper's standalone configuration from the environment, then runs the command.
set -eu
cat >/etc/zookeeper/conf/zoo.cfg <<CFG
tickTime=2000
initLimit=10
syncLimit=5
dataDir=/data
dataLogDir=/datalog
clientPort=2181
4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}
admin.enableServer=false
CFG
echo "${ZOO_MY_ID:-1}" >/data/myid
exec "$@"
