"""A pymodbus TCP client used as an independent peer by interop_test.go.

Usage: python3 pymodbus_client.py PORT
Reads holding registers 0..9 of unit 1, writes 4321 to holding register
50 and 1, 2 to 51..52, reads them back, reads coils 0..7, and prints one
line per step for the Go test to check.
"""
import sys

from pymodbus.client import ModbusTcpClient

client = ModbusTcpClient("127.0.0.1", port=int(sys.argv[1]), timeout=3)
if not client.connect():
    sys.exit("connect failed")
rr = client.read_holding_registers(0, 10, slave=1)
print("holding", ",".join(str(v) for v in rr.registers))
client.write_register(50, 4321, slave=1)
client.write_registers(51, [1, 2], slave=1)
rr = client.read_holding_registers(50, 3, slave=1)
print("written", ",".join(str(v) for v in rr.registers))
rr = client.read_coils(0, 8, slave=1)
print("coils", ",".join(str(int(b)) for b in rr.bits[:8]))
rr = client.read_holding_registers(60000, 10, slave=1)
print("exception", getattr(rr, "exception_code", "none"))
client.close()
