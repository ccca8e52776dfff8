// trajpub's bench driver for the survey's reference code (uqwhua/TrjPrivacy): reads one input file with the
// reference's own reader, times only the model's execute() call, and writes the output with the reference's own
// writer; it prints the wall and CPU seconds of that call (its thread's CPU time: the model runs on the main
// thread). Compiled against the reference's sources by bench/peers.py; not a copy of them.
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Vector;

import models.dummy.Dummy;
import models.glove.Glove;
import models.klt.KLT;
import models.mixzone.MixZone;
import shared.FileInput;
import shared.FileOutput;
import spatial.ComplexPoint;
import spatial.Grid;
import spatial.Trajectory;

public class Driver {
    public static void main(String[] args) throws IOException {
        // args: model input output k l t ratio radius n_zones min_length network pois
        String model = args[0], input = args[1], output = args[2];
        int k = Integer.parseInt(args[3]), l = Integer.parseInt(args[4]);
        float t = Float.parseFloat(args[5]), ratio = Float.parseFloat(args[6]), radius = Float.parseFloat(args[7]);
        int nZones = Integer.parseInt(args[8]), minLength = Integer.parseInt(args[9]);
        String network = args[10], pois = args[11];
        final float step = 0.001f;  // the reference Main's grid step
        ComplexPoint.needDelta = model.equals("glove") || model.equals("klt");
        Vector<Trajectory> trajectories = new Vector<>();
        FileInput.readTrajectory(input, trajectories);
        Grid grid = (model.equals("klt") || model.equals("dummy")) ? FileInput.readBeijingPOIs(pois, step, step) : null;
        Vector<Trajectory> out = new Vector<>();
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long start = System.nanoTime(), cpuStart = threads.getCurrentThreadCpuTime();
        switch (model) {
            case "glove" -> Glove.execute(trajectories, k, out);
            case "klt" -> KLT.execute(trajectories, grid, k, l, t, out);
            case "mixzone" -> MixZone.execute(trajectories, radius, nZones, minLength, step, step, network, out);
            case "dummy" -> Dummy.execute(trajectories, grid, ratio, k, l, minLength, out, output);
            default -> throw new IllegalArgumentException(model);
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        double cpuSeconds = (threads.getCurrentThreadCpuTime() - cpuStart) / 1e9;
        if (!model.equals("dummy")) {
            FileOutput.outputAnonymization(model, output, out);
        }
        System.out.println("PEERS_SECONDS " + seconds);
        System.out.println("PEERS_CPU_SECONDS " + cpuSeconds);
    }
}
