"""A Modbus TCP server whose 100 holding registers change every half second,
for idle.sh's "modbus" case (a D2000-style plant: 100 tags changing).

Usage: /usr/bin/python3 modbus_server.py PORT
"""
import logging
import sys
import threading
import time

from pymodbus.datastore import (ModbusSequentialDataBlock, ModbusServerContext,
                                ModbusSlaveContext)
from pymodbus.server import StartTcpServer

logging.disable(logging.CRITICAL)

port = int(sys.argv[1])
store = ModbusSlaveContext(hr=ModbusSequentialDataBlock(0, [0] * 100), zero_mode=True)


def change():
    while True:
        s = int(time.time() * 2) % 60000
        store.setValues(3, 0, [(s + i) % 65536 for i in range(100)])
        time.sleep(0.5)


threading.Thread(target=change, daemon=True).start()
StartTcpServer(context=ModbusServerContext(slaves=store, single=True),
               address=("127.0.0.1", port))
