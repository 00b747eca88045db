package sampler

// NERSSetReport overwrites slot's stored δ report (a test corrupting a
// stage before Save, to check that Load refuses it).
func NERSSetReport(s *NERS, slot int, td float32) { s.td[slot] = td }
