package dcqcn

import (
	"fmt"
	"math"
	"time"
)

// Preset names, as a CLI flag takes them.
const (
	PresetNamePaper = "paper"
	PresetNameMLX5  = "mlx5"
	PresetNameHPCC  = "hpcc"
)

// Presets lists the names PresetByName accepts.
func Presets() []string {
	return []string{PresetNamePaper, PresetNameMLX5, PresetNameHPCC}
}

// PresetByName returns the named preset. lineRate is used by "hpcc", whose
// values scale with the link speed; the other presets ignore it. An unknown
// name returns an error matching ErrUnknownPreset.
func PresetByName(name string, lineRate Rate) (Params, error) {
	switch name {
	case PresetNamePaper:
		return PresetPaper(), nil
	case PresetNameMLX5:
		return PresetMLX5(), nil
	case PresetNameHPCC:
		return PresetHPCC(lineRate), nil
	}
	return Params{}, fmt.Errorf("%w %q (have %q)", ErrUnknownPreset, name, Presets())
}

// PaperLineRate is the link rate of the simulator PresetPaper comes from
// (windows/ns-3-dev/mix/topology.txt: every link 40Gbps). Its rate steps
// are shares of such a link; ScaleRateSteps(PaperLineRate, r) carries them
// to links of rate r.
const PaperLineRate = 40 * Gbps

// PresetPaper is the configuration of Zhu et al.'s own ns-3 simulator for
// "Congestion Control for Large-Scale RDMA Deployments" (SIGCOMM 2015),
// github.com/bobzhuyb/ns3-rdma: the values of windows/ns-3-dev/mix/config.txt,
// and the simulator's defaults (src/point-to-point/model/qbb-net-device.cc)
// for what config.txt leaves out.
//
// The paper's text recommends other values in places (for example a 10 MB
// byte counter and a 55 µs timer); this preset follows the published code.
// That code simulates 40 Gb/s links (PaperLineRate) and 1000-byte payloads;
// on slower links scale the rate steps with ScaleRateSteps.
func PresetPaper() Params {
	return Params{
		Name:         PresetNamePaper,
		RPGTimeReset: 60 * time.Microsecond, // RP_TIMER 60
		RPGByteReset: 300000,                // BYTE_COUNTER 300000; the simulator counts bytes
		RPGThreshold: 5,                     // FAST_RECOVERY_TIMES 5
		RPGAIRate:    40 * Mbps,             // RATE_AI 40Mb/s
		RPGHAIRate:   200 * Mbps,            // RATE_HAI 200Mb/s
		// The simulator has no decrease bound; α ≤ 1 limits a cut to a halving.
		RPGMinDecFac: 0,
		// MinRate attribute default in qbb-net-device.cc; config.txt does not set it.
		RPGMinRate: 100 * Mbps,
		// The simulator has no first-CNP rate: the first CNP cuts like the rest.
		RateToSetOnFirstCNP: 0,
		// The simulator cuts on every CNP; the notification point's 50 µs
		// interval is what spaces the cuts.
		RateReduceMonitorPeriod: 0,
		DCETCPG:                 1.0 / 256,             // DCTCP_GAIN 0.00390625
		DCETCPRTT:               55 * time.Microsecond, // ALPHA_RESUME_INTERVAL 55
		// qbb-net-device.cc's constructor starts every flow with m_alpha = 0.5.
		InitialAlpha:                0.5,
		ClampTargetRate:             true,  // CLAMP_TARGET_RATE 1
		ClampTargetRateAfterTimeInc: false, // CLAMP_TARGET_RATE_AFTER_TIMER 0

		MinTimeBetweenCNPs: 50 * time.Microsecond, // CNP_INTERVAL 50

		// KMIN 40, KMAX 1000, PMAX 1.0. The switch model
		// (src/network/model/broadcom-node.cc, SetMarkingThreshold) counts
		// these in cells of 1030 bytes: a 1000-byte payload plus headers.
		Kmin: 40 * 1030,
		Kmax: 1000 * 1030,
		Pmax: 1.0,
	}
}

// PresetMLX5 is the NVIDIA ConnectX (mlx5) firmware's DCQCN defaults, as
// listed in NVIDIA's "DCQCN CC Parameters" page (DOCA documentation) and as
// an `mlxconfig query` of a ConnectX adapter prints them (CLAMP_TGT_RATE 0,
// CLAMP_TGT_RATE_AFTER_TIME_INC 1, RPG_TIME_RESET 300, RPG_BYTE_RESET 32767,
// RPG_THRESHOLD 1, RPG_AI_RATE 5, RPG_HAI_RATE 50, RPG_GD 11,
// RPG_MIN_DEC_FAC 50, RPG_MIN_RATE 1, DCE_TCP_G 1019, DCE_TCP_RTT 1,
// RATE_REDUCE_MONITOR_PERIOD 4, INITIAL_ALPHA_VALUE 1023).
//
// rpg_gd = 11 is not a field: the firmware cuts to (1 − α/2^rpg_gd)·RC with α
// in 10-bit fixed point, and α·1024/2^11 is the paper's α/2, which is the
// only cut this package implements. The firmware also differs in timing
// details this model does not copy: it samples "was there a CNP?" once per
// dce_tcp_rtt for α, and applies even the first cut of a monitor period at
// the period's end.
//
// A NIC has no congestion point, so Kmin/Kmax/Pmax come from the switch in
// a real network. To make the preset complete they are set to HPCC's DCQCN
// switch settings at 25 Gb/s (see PresetHPCC); change them to your switch's.
func PresetMLX5() Params {
	return Params{
		Name:                    PresetNameMLX5,
		RPGTimeReset:            300 * time.Microsecond, // rpg_time_reset 300
		RPGByteReset:            32767,                  // rpg_byte_reset 32767, in bytes
		RPGThreshold:            1,                      // rpg_threshold 1
		RPGAIRate:               5 * Mbps,               // rpg_ai_rate 5
		RPGHAIRate:              50 * Mbps,              // rpg_hai_rate 50
		RPGMinDecFac:            50,                     // rpg_min_dec_fac 50 %
		RPGMinRate:              1 * Mbps,               // rpg_min_rate 1
		RateToSetOnFirstCNP:     0,                      // rate_to_set_on_first_cnp 0: off
		RateReduceMonitorPeriod: 4 * time.Microsecond,   // rate_reduce_monitor_period 4
		DCETCPG:                 GainFromDCETCPG(1019),  // dce_tcp_g 1019: g = 5/1024
		DCETCPRTT:               1 * time.Microsecond,   // dce_tcp_rtt 1
		InitialAlpha:            1023.0 / 1024,          // initial_alpha_value 1023
		ClampTargetRate:         false,                  // clamp_tgt_rate 0
		// clamp_tgt_rate_after_time_inc 1
		ClampTargetRateAfterTimeInc: true,

		// min_time_between_cnps 4 µs per the DOCA table (REFERENCES.md);
		// some adapters report 2.
		MinTimeBetweenCNPs: 4 * time.Microsecond,

		Kmin: 100 * 1000, // HPCC run.py at 25 Gb/s: 100 KB
		Kmax: 400 * 1000, // 400 KB
		Pmax: 0.2,        // 0.2
	}
}

// PresetHPCC is the DCQCN setup of the HPCC paper's ns-3 simulator
// (github.com/alibaba-edu/High-Precision-Congestion-Control, `run.py --cc
// dcqcn` and the "Mellanox's version of DCQCN" in
// simulation/src/point-to-point/model/rdma-hw.cc), whose rate steps and ECN
// thresholds scale with the link speed: f = lineRate / 25 Gb/s.
//
// That model has no byte counter, so RPGByteReset is 0 and the stage is
// decided by the timer alone. Its stage rule also differs from the paper's
// (after F fast-recovery steps it does one additive step and then hyper
// steps of a constant R_HAI); this package applies the paper's rule to the
// same parameters.
func PresetHPCC(lineRate Rate) Params {
	f := float64(lineRate / (25 * Gbps))
	kb := func(v float64) int { return int(math.Round(v * f * 1000)) } // switch-mmu.cc ConfigEcn: KB × 1000
	return Params{
		Name:         PresetNameHPCC,
		RPGTimeReset: 300 * time.Microsecond, // t_inc 300 (RP_TIMER)
		RPGByteReset: 0,                      // rdma-hw.cc's model has no byte counter
		RPGThreshold: 1,                      // FAST_RECOVERY_TIMES 1
		RPGAIRate:    Rate(5 * f * float64(Mbps)),
		RPGHAIRate:   Rate(50 * f * float64(Mbps)),
		RPGMinDecFac: 0, // no bound in rdma-hw.cc
		// MIN_RATE 1000Mb/s (not scaled), capped at the line rate so that
		// slow links still validate.
		RPGMinRate:              min(1000*Mbps, lineRate),
		RateToSetOnFirstCNP:     0,                    // RateOnFirstCnp 1.0 (a fraction of the rate): off
		RateReduceMonitorPeriod: 4 * time.Microsecond, // t_dec 4 (RATE_DECREASE_INTERVAL)
		DCETCPG:                 1.0 / 256,            // g 0.00390625 (EWMA_GAIN)
		DCETCPRTT:               1 * time.Microsecond, // t_alpha 1 (ALPHA_RESUME_INTERVAL)
		InitialAlpha:            1,                    // cnp_received_mlx sets m_alpha = 1
		ClampTargetRate:         false,                // CLAMP_TARGET_RATE 0
		// With clamping off, CheckRateDecreaseMlx sets RT ← RC only after a
		// (timer) increase: the firmware's clamp_tgt_rate_after_time_inc.
		ClampTargetRateAfterTimeInc: true,

		// Receivers acknowledge every packet (L2_ACK_INTERVAL 1) and flag
		// the ACK of each CE-marked packet as a CNP: no CNP interval.
		MinTimeBetweenCNPs: 0,

		Kmin: kb(100), // KMIN_MAP 100·bw/25 KB
		Kmax: kb(400), // KMAX_MAP 400·bw/25 KB
		Pmax: 0.2,     // PMAX_MAP 0.2
	}
}
