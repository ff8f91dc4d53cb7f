package modbus

// crcTable is the table for CRC-16/MODBUS (reflected polynomial 0xA001,
// initial value 0xFFFF), computed once at compile time's first use.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC16 returns the CRC-16/MODBUS of b. On the wire it is sent low byte
// first.
func CRC16(b []byte) uint16 {
	crc := uint16(0xFFFF)
	for _, v := range b {
		crc = crc>>8 ^ crcTable[byte(crc)^v]
	}
	return crc
}
