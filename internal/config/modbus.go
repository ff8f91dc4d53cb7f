package config

// Modbus lists the Modbus stations Pith polls ([[modbus.client]]) and the
// Modbus servers it offers ([[modbus.server]]).
type Modbus struct {
	// Clients are the stations polled, one per device (unit) on a link.
	Clients []ModbusClient `toml:"client"`
	// Servers publish tags as registers to other Modbus clients.
	Servers []ModbusServer `toml:"server"`
}

// ModbusClient is one polled station: a unit on a TCP, RTU or RTU-over-TCP
// link, and the tags read from it.
type ModbusClient struct {
	// Name identifies the station in logs and in its statistics tags
	// (pith.station.<name>.*): letters, digits, '_' and '-', unique.
	Name string `toml:"name"`
	// URL is the link: "tcp://host:port", "rtuovertcp://host:port" or
	// "rtu:///dev/ttyUSB0?baud=9600&parity=N&stop=1&data=8". See
	// ParseModbusURL.
	URL string `toml:"url"`
	// Unit is the Modbus unit (slave) id, 0..255; RTU needs 1..247 since 0
	// is broadcast there. Default 1.
	Unit int `toml:"unit"`
	// Period is the polling period; 0 polls as fast as the device
	// answers. Default 1s.
	Period Duration `toml:"period"`
	// Phase moves the polling ticks from the multiples of Period to
	// Phase after them. Not a file key: the active box of a redundant
	// pair polls half a period late when its name sorts after the other
	// box's, so that the two boxes' polls never fall at the same time
	// during a step-down's hand-over (docs/redundancy.md).
	Phase Duration `toml:"-"`
	// Timeout is how long a request waits for its answer. Default 1s.
	Timeout Duration `toml:"timeout"`
	// Pause is a delay between two requests to this station, for devices
	// that need it. Default 0.
	Pause Duration `toml:"pause"`
	// Tags are the values read, as written in the file; ExpandedTags gives
	// them typed and with count expanded.
	Tags []ModbusTagSpec `toml:"tags"`
}

// ModbusTagSpec is one entry of a station's tags as written in the file.
type ModbusTagSpec struct {
	// Name is the tag name; "{i}" in it becomes the element index when
	// Count > 1.
	Name string `toml:"name"`
	// Register is "AREA:ADDRESS", AREA one of holding, input, coil,
	// discrete and ADDRESS the zero-based PDU address 0..65535.
	Register string `toml:"register"`
	// Type is the value's type: int16, uint16, int32, uint32, int64,
	// uint64, float32, float64 or bool. Coils and discrete inputs are
	// bool; registers are never bool.
	Type string `toml:"type"`
	// Order is the byte order of multi-byte values: ABCD (default), CDAB,
	// BADC or DCBA. Not for bool.
	Order string `toml:"order"`
	// Count expands the entry into Count consecutive values. Default 1.
	Count int `toml:"count"`
	// Scale multiplies the raw value: value = raw*Scale + Offset. Default
	// 1, never 0.
	Scale float64 `toml:"scale"`
	// Offset is added after scaling. Default 0.
	Offset float64 `toml:"offset"`
	// Unit is the engineering unit shown with the value, such as "m3/h".
	Unit string `toml:"unit"`
	// Description says what the value is.
	Description string `toml:"description"`
	// Archive says which values are archived: all, change (default: a
	// value different from the last archived one) or deadband.
	Archive string `toml:"archive"`
	// Deadband is, with Archive "deadband", the least change (in
	// engineering units) that is archived. Must be > 0 then, and unset
	// otherwise.
	Deadband float64 `toml:"deadband"`
}

// ModbusServer is one Modbus TCP server publishing tags as registers.
type ModbusServer struct {
	// Listen is the host:port the server listens on.
	Listen string `toml:"listen"`
	// Unit is the unit id answered, 1..247; 0 (default) answers every
	// unit id.
	Unit int `toml:"unit"`
	// AllowRemoteWrites lets a server whose Listen address other machines
	// can reach (anything but loopback) have writable registers. Modbus has
	// no authentication: every client that reaches the port can write
	// those tags, so such a config is refused unless this says so. Default
	// false.
	AllowRemoteWrites bool `toml:"allow_remote_writes"`
	// Registers map register ranges to tags, as written in the file;
	// ExpandedRegisters gives them typed and with count expanded.
	Registers []ModbusRegisterSpec `toml:"registers"`
}

// ModbusRegisterSpec is one entry of a server's registers as written in the
// file.
type ModbusRegisterSpec struct {
	// Register is "AREA:ADDRESS", as in ModbusTagSpec.
	Register string `toml:"register"`
	// Tag is the tag published; "{i}" in it becomes the element index when
	// Count > 1.
	Tag string `toml:"tag"`
	// Type is the register type, as in ModbusTagSpec.
	Type string `toml:"type"`
	// Order is the byte order, as in ModbusTagSpec. Default ABCD.
	Order string `toml:"order"`
	// Count expands the entry into Count consecutive values. Default 1.
	Count int `toml:"count"`
	// Scale and Offset convert the tag's value to the register's, the
	// inverse of a client tag's conversion so that both ends of a link
	// read alike: raw = (value - Offset) / Scale. Defaults 1 and 0.
	Scale float64 `toml:"scale"`
	// Offset: see Scale.
	Offset float64 `toml:"offset"`
	// Writable lets clients write the register (holding and coil only);
	// a write is applied to the tag. Default false.
	Writable bool `toml:"writable"`
}

// DefaultModbusClient returns a station with every default filled in, the
// starting point for a station built in code (the demo plant).
func DefaultModbusClient() ModbusClient {
	return ModbusClient{
		Unit:    DefaultModbusClientUnit,
		Period:  DefaultModbusPeriod,
		Timeout: DefaultModbusTimeout,
	}
}

// DefaultModbusTagSpec returns a tag entry with every default filled in.
func DefaultModbusTagSpec() ModbusTagSpec {
	return ModbusTagSpec{Order: "ABCD", Count: 1, Scale: 1, Archive: "change"}
}

// DefaultModbusRegisterSpec returns a server register entry with every
// default filled in.
func DefaultModbusRegisterSpec() ModbusRegisterSpec {
	return ModbusRegisterSpec{Order: "ABCD", Count: 1, Scale: 1}
}

// applyElementDefaults fills the defaults of array elements. The decoder
// makes array elements from zero values, and for some keys zero is a valid
// explicit setting ("period = 0s", "unit = 0") or an error worth reporting
// ("count = 0", "scale = 0"), so a default is applied only where its key is
// absent from the file.
func applyElementDefaults(cfg *Config, tree map[string]any) {
	mb := subTable(tree, "modbus")
	dc, dt, dr := DefaultModbusClient(), DefaultModbusTagSpec(), DefaultModbusRegisterSpec()
	for i, raw := range tables(mb, "client") {
		c := &cfg.Modbus.Clients[i]
		if !has(raw, "unit") {
			c.Unit = dc.Unit
		}
		if !has(raw, "period") {
			c.Period = dc.Period
		}
		if !has(raw, "timeout") {
			c.Timeout = dc.Timeout
		}
		for j, rawTag := range tables(raw, "tags") {
			t := &c.Tags[j]
			if !has(rawTag, "order") {
				t.Order = dt.Order
			}
			if !has(rawTag, "count") {
				t.Count = dt.Count
			}
			if !has(rawTag, "scale") {
				t.Scale = dt.Scale
			}
			if !has(rawTag, "archive") {
				t.Archive = dt.Archive
			}
		}
	}
	applyOPCUADefaults(cfg, tree)
	for i, raw := range tables(mb, "server") {
		s := &cfg.Modbus.Servers[i]
		for j, rawReg := range tables(raw, "registers") {
			r := &s.Registers[j]
			if !has(rawReg, "order") {
				r.Order = dr.Order
			}
			if !has(rawReg, "count") {
				r.Count = dr.Count
			}
			if !has(rawReg, "scale") {
				r.Scale = dr.Scale
			}
		}
	}
}
