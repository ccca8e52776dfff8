import basic.ComplexPoint;
import basic.Grid;
import basic.Trajectory;
import index.Calculate;
import io.FileIO;
import signatures.Function;
import signatures.temporalEMD.EMDmetric;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileReader;
import java.io.IOException;
import java.io.PrintWriter;
import java.sql.Timestamp;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Vector;

/**
 * Runs TrjLink's linking (uqwhua/TrjLink: its map-matching grid, signature construction, signature reduction and
 * similarity, unchanged) with a released data set as the query and the raw data as the data set.
 *
 * TrjLink's own entry point (main.Main) links the odd-day half of each object to the even-day half of every object
 * in files named 1.txt to 10356.txt with at least 500 points; this driver keeps everything of it but that
 * protocol: it reads two folders of files in TrjLink's input format (one object per file, lines
 * "id,yyyy-mm-dd hh:mm:ss,lng,lat"), builds the signatures of the query set then of the data set with
 * signatures.Function.constructSignature (as Main does, query first), cuts both with Function.cutSignature and
 * scores every (query, data) pair with the measure Main's linear scan uses (cosine, or 1 - EMD for temporal).
 * For every SIGNATURE:REDUCTION of its list it writes OUT_PREFIX_SIGNATURE_REDUCTION.csv, "query,data,similarity"
 * for every pair of positive similarity (Main's linear scan ignores the others), and prints its seconds; the ranking
 * and the scoring are done by bench/external_attacks.py.
 *
 * Usage: TrjLinkDriver ROAD_NODES MAX_NODE_ID QUERY_DIR DATA_DIR SIGNATURE:REDUCTION[,...] GRAM_LEN TIME_WINDOW
 *        GRID_NUM OUT_PREFIX
 */
public class TrjLinkDriver {

    public static void main(String[] args) throws IOException {
        if (args.length != 9) {
            System.err.println("usage: TrjLinkDriver ROAD_NODES MAX_NODE_ID QUERY_DIR DATA_DIR SIGNATURE:REDUCTION[,...] "
                    + "GRAM_LEN TIME_WINDOW GRID_NUM OUT_PREFIX");
            System.exit(2);
        }
        final float step = 0.001f;  // Main's grid step for map-matching
        final Grid grid = FileIO.buildGridIndex(args[0], Integer.parseInt(args[1]), step, step);
        final Vector<Trajectory> query = readFolder(args[2]), data = readFolder(args[3]);
        final int gramLen = Integer.parseInt(args[5]), timeWindow = Integer.parseInt(args[6]);
        final int gridNum = Integer.parseInt(args[7]);
        for (String run : args[4].split(",")) {
            final String sigType = run.split(":")[0];
            final int reduction = Integer.parseInt(run.split(":")[1]);
            link(grid, query, data, sigType, reduction, gramLen, timeWindow, gridNum,
                    args[8] + "_" + sigType + "_" + reduction + ".csv");
        }
    }

    private static void link(Grid grid, Vector<Trajectory> query, Vector<Trajectory> data, String sigType,
                             int reduction, int gramLen, int timeWindow, int gridNum, String output)
            throws IOException {
        long started = System.nanoTime();
        Map<String, Map<Integer, Double>> querySig = Function.constructSignature(query, grid, sigType, gramLen,
                timeWindow, gridNum);
        Map<String, Map<Integer, Double>> dataSig = Function.constructSignature(data, grid, sigType, gramLen,
                timeWindow, gridNum);
        final boolean temporal = sigType.equalsIgnoreCase("time") || sigType.equalsIgnoreCase("temporal");
        Map<String, Map<Integer, Double>> dataCut = new HashMap<>();
        dataSig.forEach((id, sig) -> dataCut.put(id, Function.cutSignature(sig, reduction)));
        long pairs = 0;
        try (PrintWriter out = new PrintWriter(output)) {
            out.println("query,data,similarity");
            for (Map.Entry<String, Map<Integer, Double>> q : querySig.entrySet()) {
                Map<Integer, Double> qCut = Function.cutSignature(q.getValue(), reduction);
                if (qCut == null || qCut.isEmpty()) {
                    continue;
                }
                for (Map.Entry<String, Map<Integer, Double>> d : dataCut.entrySet()) {
                    if (d.getValue() == null || d.getValue().isEmpty()) {
                        continue;
                    }
                    double sim = temporal ? EMDmetric.computeSimilarity(qCut, d.getValue())
                            : Calculate.cosineSimilarity(qCut, d.getValue());
                    if ((float) sim > 0) {
                        out.println(q.getKey() + "," + d.getKey() + "," + (float) sim);
                        pairs++;
                    }
                }
            }
        }
        String tag = sigType + ":" + reduction;
        System.out.printf("TRJLINK_SECONDS %s %.3f%n", tag, (System.nanoTime() - started) / 1e9);
        System.out.printf("TRJLINK_QUERY_SIGNATURES %s %d%n", tag, querySig.size());
        System.out.printf("TRJLINK_PAIRS %s %d%n", tag, pairs);
    }

    /** Every file of a folder, one trajectory each under the id of its lines (TrjLink's input format). */
    private static Vector<Trajectory> readFolder(String folder) throws IOException {
        File[] files = new File(folder).listFiles((dir, name) -> name.endsWith(".txt"));
        if (files == null) {
            throw new IOException("not a folder: " + folder);
        }
        Arrays.sort(files);
        Vector<Trajectory> out = new Vector<>();
        for (File file : files) {
            java.util.List<ComplexPoint> points = new java.util.ArrayList<>();
            int id = -1;
            try (BufferedReader br = new BufferedReader(new FileReader(file))) {
                String line;
                while ((line = br.readLine()) != null) {
                    String[] tokens = line.split(",");
                    id = Integer.parseInt(tokens[0]);
                    long second = Timestamp.valueOf(tokens[1]).getTime() / 1000;
                    points.add(new ComplexPoint(Float.parseFloat(tokens[2]), Float.parseFloat(tokens[3]), second));
                }
            }
            if (!points.isEmpty()) {
                out.add(new Trajectory(id, id, points));
            }
        }
        return out;
    }
}
