"""A pymodbus TCP server used as an independent peer by interop_test.go.

Usage: python3 pymodbus_server.py PORT
Holding register i holds 3*i for i in 0..199 (addresses from 0), coils
0..15 alternate starting with True.
"""
import logging
import sys

from pymodbus.datastore import (ModbusSequentialDataBlock, ModbusServerContext,
                                ModbusSlaveContext)
from pymodbus.server import StartTcpServer

logging.disable(logging.CRITICAL)

port = int(sys.argv[1])
store = ModbusSlaveContext(
    hr=ModbusSequentialDataBlock(0, [3 * i for i in range(200)]),
    ir=ModbusSequentialDataBlock(0, [i for i in range(200)]),
    co=ModbusSequentialDataBlock(0, [i % 2 == 0 for i in range(16)]),
    di=ModbusSequentialDataBlock(0, [False] * 16),
    zero_mode=True,
)
StartTcpServer(context=ModbusServerContext(slaves=store, single=True),
               address=("127.0.0.1", port))
