package iceberg

// PlanWhole makes every export plan from the whole state (on) or, when it
// can, from a state loaded in part (off, the default).
func PlanWhole(on bool) { planWhole = on }
