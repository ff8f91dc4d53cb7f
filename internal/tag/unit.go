package tag

// SetUnit sets the engineering unit of tag name, keeping the rest of its
// definition; a tag not defined yet is defined with source. Drivers that
// learn units from the device (Sparkplug B births) call it.
func (t *Table) SetUnit(name, unit, source string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.names[name]; ok {
		t.ents[id].def.Unit = unit
		return nil
	}
	_, err := t.defineLocked(Def{Name: name, Unit: unit, Source: source})
	return err
}
